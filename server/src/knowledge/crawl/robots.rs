//! robots.txt (RFC 9309) for the crawler: the verdict of one origin, fetched once. A 2xx
//! file is parsed for the product token [`ROBOTS_USER_AGENT`]; 4xx means no restrictions;
//! 5xx or an unreachable file means everything is disallowed (RFC 9309 § 2.3.1.4).
//! `Crawl-delay` is honoured up to [`MAX_CRAWL_DELAY`], and `Sitemap:` lines are kept for
//! the sitemap reader.

use std::time::Duration;

use texting_robots::Robot;
use url::Url;

use crate::outbound::{Fetched, NetError};

/// The product token matched against robots.txt `User-agent` lines.
pub const ROBOTS_USER_AGENT: &str = "AgentChat";
/// The longest robots.txt `Crawl-delay` honoured; longer delays are shortened to this.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(2);
/// Bytes of robots.txt parsed (RFC 9309 § 2.5 asks for at least 500 KiB).
const MAX_ROBOTS_BYTES: usize = 512 * 1024;

/// The robots.txt verdict for one origin.
#[derive(Debug)]
pub(super) struct RobotsRules {
    robot: Option<Robot>,
    /// Set when robots.txt was unreachable (5xx or a failed fetch): everything is disallowed.
    unreachable: Option<NetError>,
    pub(super) sitemaps: Vec<String>,
    pub(super) delay: Duration,
}

impl RobotsRules {
    pub(super) fn allow_all() -> Self {
        Self {
            robot: None,
            unreachable: None,
            sitemaps: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// Builds the verdict from a fetch of `/robots.txt` (RFC 9309 § 2.3.1).
    pub(super) fn from_fetch(result: Result<Fetched, NetError>) -> Self {
        match result {
            Ok(f) if (200..300).contains(&f.status) => {
                let body = &f.body[..f.body.len().min(MAX_ROBOTS_BYTES)];
                Self::parse(body)
            }
            Ok(f) if (400..500).contains(&f.status) => Self::allow_all(),
            Ok(f) => Self {
                unreachable: Some(NetError::Http(f.status)),
                ..Self::allow_all()
            },
            Err(e) => Self {
                unreachable: Some(e),
                ..Self::allow_all()
            },
        }
    }

    fn parse(body: &[u8]) -> Self {
        match Robot::new(ROBOTS_USER_AGENT, body) {
            Ok(robot) => {
                let delay = robot
                    .delay
                    .filter(|d| d.is_finite() && *d > 0.0)
                    .map_or(Duration::ZERO, |d| {
                        Duration::from_secs_f32(d.min(MAX_CRAWL_DELAY.as_secs_f32()))
                    });
                Self {
                    sitemaps: robot.sitemaps.clone(),
                    delay,
                    robot: Some(robot),
                    unreachable: None,
                }
            }
            // The parser is forgiving; a file it cannot read at all restricts nothing.
            Err(_) => Self::allow_all(),
        }
    }

    /// `Ok` when `url` may be fetched; otherwise the reason.
    pub(super) fn check(&self, url: &Url) -> Result<(), RobotsDenial> {
        if let Some(e) = &self.unreachable {
            return Err(RobotsDenial::Unreachable(e.clone()));
        }
        match &self.robot {
            Some(robot) if !robot.allowed(url.as_str()) => Err(RobotsDenial::Disallowed),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RobotsDenial {
    Disallowed,
    Unreachable(NetError),
}

impl RobotsDenial {
    pub(super) fn reason(&self) -> String {
        match self {
            Self::Disallowed => "robots.txt disallows this page".to_owned(),
            Self::Unreachable(e) => {
                format!("robots.txt could not be read ({e}), so the site is treated as disallowing all pages")
            }
        }
    }

    pub(super) fn into_start_error(self) -> NetError {
        match self {
            Self::Disallowed => NetError::RobotsDisallowed,
            Self::Unreachable(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("test URL")
    }

    #[test]
    fn robots_rules() {
        let rules = RobotsRules::parse(
            b"User-agent: *\nDisallow: /\n\nUser-agent: AgentChat\nDisallow: /private/\nCrawl-delay: 30\nSitemap: https://e.x/sm.xml\n",
        );
        assert_eq!(rules.check(&url("https://e.x/public")), Ok(()));
        assert_eq!(
            rules.check(&url("https://e.x/private/a")),
            Err(RobotsDenial::Disallowed)
        );
        assert_eq!(rules.delay, MAX_CRAWL_DELAY, "delay is capped");
        assert_eq!(rules.sitemaps, vec!["https://e.x/sm.xml".to_owned()]);

        let fetched = |status: u16, body: &'static [u8]| {
            Ok(Fetched {
                url: url("https://e.x/robots.txt"),
                status,
                content_type: Some("text/plain".into()),
                body: bytes::Bytes::from_static(body),
                etag: None,
                last_modified: None,
            })
        };
        let missing = RobotsRules::from_fetch(fetched(404, b"not found"));
        assert_eq!(missing.check(&url("https://e.x/anything")), Ok(()));
        let forbidden = RobotsRules::from_fetch(fetched(403, b""));
        assert_eq!(forbidden.check(&url("https://e.x/anything")), Ok(()));
        let broken = RobotsRules::from_fetch(fetched(503, b""));
        assert_eq!(
            broken.check(&url("https://e.x/anything")),
            Err(RobotsDenial::Unreachable(NetError::Http(503)))
        );
        let failed = RobotsRules::from_fetch(Err(NetError::Timeout));
        assert!(failed.check(&url("https://e.x/")).is_err());
    }
}
