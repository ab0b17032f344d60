//! Who is on the other end of a local socket: the host's own commands must not
//! act as its clients (ARCHITECTURE.md, invariant "The host's own commands are
//! refused on the control socket and the HTTP door, in every sandbox mode"), and
//! a local TCP client's owner is known ([`tcp_client`]).

use std::net::SocketAddr;

use crate::{Caller, SessionStatus, Sessions};

/// The real user id of the host process.
pub fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

impl Sessions {
    /// Why process `pid` (a socket peer, from `SO_PEERCRED`) is one of the host's
    /// own commands, or `None`. It is one when it belongs to a running session (its
    /// session id is a session's pid: sessions lead their own), when the host is
    /// among its ancestors (a command that left its session with `setsid`, or an
    /// orphan the host adopted as subreaper: docs/processes.md), when it is in a
    /// cgroup of the host's commands (`toolhost-<host pid>/…`, which a command
    /// cannot leave without writing another cgroup's `cgroup.procs`), or when it
    /// runs with `no_new_privs` while the host does not (every confined command
    /// does, including ones that left their session). The last three hold in
    /// every sandbox mode, `full-access` included.
    pub fn command_peer(&self, pid: i32) -> Option<&'static str> {
        if let Ok(sid) = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid))) {
            let ours = self
                .list(&Caller::Host)
                .into_iter()
                .any(|s| s.status == SessionStatus::Running && s.pid == Some(sid.as_raw() as u32));
            if ours {
                return Some("a command the host started");
            }
        }
        let host = std::process::id();
        if descends_from(pid, host) {
            return Some("a process started by a command of the host");
        }
        if in_commands_cgroup(pid, host) {
            return Some("a process in a command's cgroup");
        }
        if no_new_privs(&format!("/proc/{pid}/status")) == Some(true)
            && no_new_privs("/proc/self/status") == Some(false)
        {
            return Some("a sandboxed process (no_new_privs)");
        }
        None
    }
}

/// The `NoNewPrivs` flag of a `/proc/<pid>/status` file.
fn no_new_privs(status_path: &str) -> Option<bool> {
    let status = std::fs::read_to_string(status_path).ok()?;
    let line = status.lines().find(|l| l.starts_with("NoNewPrivs:"))?;
    Some(line.split_whitespace().nth(1)? == "1")
}

impl Sessions {
    /// Why the process holding the socket `inode` (a TCP client on this
    /// machine, [`tcp_client`]) is one of the host's commands, or `None`: a
    /// descendant of the host (escaped commands and orphans it adopted
    /// included) or a process in a command's cgroup holds it, found in
    /// their `/proc/<pid>/fd`. Blocking: one `/proc` scan and the
    /// descriptors of the host's own process tree.
    pub fn command_holding_socket(&self, inode: u64) -> Option<&'static str> {
        let table = crate::sessions::proc_scan::proc_table(std::time::Instant::now());
        let mut queue: Vec<u32> = table.children(std::process::id()).collect();
        let mut candidates = Vec::new();
        while let Some(pid) = queue.pop() {
            candidates.push(pid);
            queue.extend(table.children(pid));
        }
        candidates.extend(self.cgroup_members());
        let target = format!("socket:[{inode}]");
        let holds = |pid: u32| {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str())
                })
        };
        candidates
            .into_iter()
            .any(holds)
            .then_some("a command the host started (or a process it started)")
    }
}

/// Most parent links followed from a peer up to `init` (a deeper chain is
/// taken for a descendant: the host cannot tell).
const MAX_ANCESTRY: usize = 1024;

/// Whether `ancestor` is `pid`'s parent, grandparent, … (`/proc/<pid>/stat`).
/// A process that vanished on the way is no descendant.
fn descends_from(pid: i32, ancestor: u32) -> bool {
    let mut current = pid;
    for _ in 0..MAX_ANCESTRY {
        let Some(stat) = crate::sessions::proc_scan::read_stat(current) else {
            return false;
        };
        if stat.ppid == ancestor {
            return true;
        }
        if stat.ppid <= 1 {
            return false;
        }
        current = stat.ppid as i32;
    }
    true
}

/// Whether a line of `/proc/<pid>/cgroup` names a cgroup under the host's
/// commands' parent `toolhost-<host>` (`sessions/tree.rs`).
fn in_commands_cgroup(pid: i32, host: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    let dir = format!("/toolhost-{host}/");
    text.lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .any(|path| path.contains(&dir))
}

/// The local end of a TCP connection on this machine, as the kernel lists it
/// in `/proc/net/tcp` and `/proc/net/tcp6` (the connection's own network
/// namespace): who owns the client's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpClient {
    /// The real user id that made the socket.
    pub uid: u32,
    /// The socket's inode (`socket:[INODE]` in the owner's `/proc/<pid>/fd`).
    pub inode: u64,
}

/// The client socket of an accepted TCP connection whose peer is on this
/// machine: the socket whose local address is `peer` and remote address
/// `local` (the server's end), if the kernel lists one. `None` for a peer
/// on another machine, or one that closed its socket already.
///
/// Errors: the tables cannot be read.
pub fn tcp_client(local: SocketAddr, peer: SocketAddr) -> std::io::Result<Option<TcpClient>> {
    let (local, peer) = (unmapped(local), unmapped(peer));
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(text) => text,
            // No IPv6 in this kernel or namespace.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some(client) = find_client(&text, local, peer) {
            return Ok(Some(client));
        }
    }
    Ok(None)
}

/// `addr` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, a dual-stack
/// socket's view of an IPv4 peer) as the IPv4 address it is.
fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => v6
            .ip()
            .to_ipv4_mapped()
            .map_or(addr, |ip| SocketAddr::new(ip.into(), v6.port())),
        SocketAddr::V4(_) => addr,
    }
}

/// The entry of one `/proc/net/tcp{,6}` text whose local address is `peer`
/// and remote address `local`.
fn find_client(text: &str, local: SocketAddr, peer: SocketAddr) -> Option<TcpClient> {
    text.lines().skip(1).find_map(|line| {
        let mut fields = line.split_whitespace();
        let own = parse_proc_addr(fields.nth(1)?)?;
        let remote = parse_proc_addr(fields.next()?)?;
        if own != peer || remote != local {
            return None;
        }
        // st, tx:rx, tr:when, retrnsmt, then uid, timeout, inode.
        let mut rest = fields.skip(4);
        let uid = rest.next()?.parse().ok()?;
        let inode = rest.nth(1)?.parse().ok()?;
        Some(TcpClient { uid, inode })
    })
}

/// An `ADDR:PORT` of `/proc/net/tcp{,6}`: the address as the kernel stores
/// it (network order) printed as native-endian 32-bit hex words, the port in
/// hex.
fn parse_proc_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip = match addr.len() {
        8 => std::net::IpAddr::from(word(0)?),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            let v6 = std::net::Ipv6Addr::from(bytes);
            // An IPv4 peer of a dual-stack socket.
            v6.to_ipv4_mapped()
                .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_descends_from_this_process_and_this_process_from_no_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id();
        assert!(descends_from(child.id() as i32, me));
        assert!(!descends_from(me as i32, child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_loopback_client_socket_is_found_with_its_owner() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = std::net::TcpListener::bind(bind) else {
                continue; // no IPv6 loopback here
            };
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (_server, peer) = listener.accept().unwrap();
            let local = listener.local_addr().unwrap();
            let found = tcp_client(local, peer).unwrap().expect("the client socket");
            assert_eq!(found.uid, current_uid());
            assert!(found.inode > 0);
            drop(client);
        }
    }
}
