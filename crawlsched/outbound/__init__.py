"""Where crawlsched may send: one address rule for every outgoing connection (`addresses`), and
the socket guard that holds it for libraries that connect by themselves (`socket_guard`)."""
