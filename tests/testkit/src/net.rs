//! Loopback ports for servers a test starts.

use std::net::TcpListener;

/// A loopback port that was free a moment ago: bound, then released, for a server that binds
/// it next. Prefer letting the server bind port 0 and report its address where it can.
pub fn free_port() -> u16 {
    let [port] = free_ports::<1>();
    port
}

/// `N` distinct free loopback ports (held open together while they are chosen, so they differ).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    std::array::from_fn(|i| {
        listeners[i]
            .local_addr()
            .expect("the address of a bound port")
            .port()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_differ_and_can_be_bound() {
        let ports = free_ports::<3>();
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
        for port in ports.into_iter().chain([free_port()]) {
            TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
        }
    }
}
