//! `agentchat serve` as a child process of a test: the address it announces.
//! Shared by `server/tests/crash.rs` and `server/tests/scaleout.rs` (`mod process;`).

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::Child,
    time::Duration,
};

/// Waits (60 s at most) for the "AgentChat listening on http://ADDR" line on `child`'s
/// standard output, which must be piped, and returns ADDR. The rest of the output is read
/// and dropped, so that the child never blocks on a full pipe.
///
/// # Panics
/// When the line does not come in time, or `child`'s output was not piped.
pub fn announced_addr(child: &mut Child) -> SocketAddr {
    let stdout = child.stdout.take().expect("the child's stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if !sent {
                if let Some(rest) = line.split("AgentChat listening on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                    sent = true;
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("agentchat announces its address");
    addr.trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .expect("the announced address parses")
}
