"""The lab DDP baseline's TCPStore listens on the address the ranks use, not on every interface."""

import datetime

import psutil

from adass.runtime.cluster.bootstrap import tcp_store
from adass.runtime.launch import free_port


def test_the_store_binds_the_masters_address_only():
    port = free_port()
    timeout = datetime.timedelta(seconds=10)
    server = tcp_store("127.0.0.1", port, 0, 2, timeout)
    client = tcp_store("127.0.0.1", port, 1, 2, timeout)
    client.set("key", "value")
    assert server.get("key") == b"value"
    listening = [
        c.laddr for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.port == port
    ]
    assert listening and all(address.ip == "127.0.0.1" for address in listening)
