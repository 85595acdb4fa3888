//! Where the format readers put their text: [`SectionSink`] collects sections, dropping empty
//! ones and enforcing [`ExtractLimits`]' character and time limits; the helpers tidy text and
//! titles the same way for every format.

use std::time::{Duration, Instant};

use super::{thousands, ExtractError, ExtractLimits, Section, MAX_LINE_TITLE_CHARS};

/// When extraction must stop.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline(Option<Instant>);

impl Deadline {
    /// `budget` from now; never, when that is past the clock's range.
    pub(super) fn after(budget: Duration) -> Self {
        Deadline(Instant::now().checked_add(budget))
    }

    /// [`ExtractError::Timeout`] once the deadline has passed.
    pub(super) fn check(&self) -> Result<(), ExtractError> {
        match self.0 {
            Some(end) if Instant::now() >= end => Err(ExtractError::Timeout),
            _ => Ok(()),
        }
    }
}

/// Collects sections, dropping empty ones and enforcing the character and time limits.
pub(super) struct SectionSink<'a> {
    pub(super) limits: &'a ExtractLimits,
    pub(super) deadline: Deadline,
    pub(super) sections: Vec<Section>,
    /// Characters in `sections`.
    chars: usize,
}

impl<'a> SectionSink<'a> {
    pub(super) fn new(limits: &'a ExtractLimits) -> Self {
        SectionSink {
            limits,
            deadline: Deadline::after(limits.deadline),
            sections: Vec::new(),
            chars: 0,
        }
    }

    /// Adds a section after tidying its text; empty text is dropped.
    pub(super) fn push(
        &mut self,
        heading_path: &[String],
        text: &str,
        page: Option<u32>,
    ) -> Result<(), ExtractError> {
        let text = tidy(text);
        if text.is_empty() {
            return Ok(());
        }
        self.chars += text.chars().count();
        self.check_chars(0)?;
        self.sections.push(Section {
            heading_path: heading_path.to_vec(),
            text,
            page,
        });
        Ok(())
    }

    /// Fails when the characters kept so far plus `pending` exceed the limit.
    pub(super) fn check_chars(&self, pending: usize) -> Result<(), ExtractError> {
        let max = self.limits.max_text_chars;
        if self.chars.saturating_add(pending) > max {
            Err(ExtractError::TooLarge(format!(
                "it holds more than {} characters of text",
                thousands(max as u64)
            )))
        } else {
            Ok(())
        }
    }
}

/// Normalises text: `\n` line ends, control characters but tab and LF dropped, trailing
/// spaces removed, blank-line runs collapsed, trimmed.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0usize;
    for line in text.split('\n') {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run == 1 && !out.is_empty() {
                out.push('\n');
            }
            continue;
        }
        blank_run = 0;
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.extend(line.chars().filter(|&c| c == '\t' || !c.is_control()));
        out.push('\n');
    }
    let trimmed = out.trim();
    if trimmed.len() == out.len() {
        out
    } else {
        trimmed.to_owned()
    }
}

/// `text` on one line: whitespace runs (line breaks included) become single spaces.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first non-empty line of `text` if at most [`MAX_LINE_TITLE_CHARS`] characters.
pub(super) fn first_line_title(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    (line.chars().count() <= MAX_LINE_TITLE_CHARS).then(|| one_line(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_normalises_whitespace() {
        assert_eq!(tidy("  \n\nA  \r\nB\x07\n\n\n\nC\t\n  "), "A\nB\n\nC");
        assert_eq!(tidy(" \n \n"), "");
    }
}
