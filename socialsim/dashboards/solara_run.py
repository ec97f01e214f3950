"""``python -m solara``, serving on the socket ``socialsim dashboard`` bound and listens on for it.

The command binds the port before it prints the address and hands the socket to this process (its
file descriptor in ``SOCIALSIM_DASHBOARD_FD``), so nothing can take the port while Solara starts.
Solara's ``run`` takes no socket: uvicorn's ``Server.run`` is given it here. Without the variable
(a server started by hand or by a test) this is ``python -m solara`` as it is.
"""

from __future__ import annotations

import os
import socket
import sys

from socialsim.dashboards.server import FD_VARIABLE


def main() -> None:
    if fd := os.environ.pop(FD_VARIABLE, ""):
        import uvicorn

        listener = socket.socket(fileno=int(fd))
        run = uvicorn.Server.run
        uvicorn.Server.run = lambda self, sockets=None: run(self, sockets=sockets or [listener])
    from solara.__main__ import main as solara_main

    sys.argv[0] = "solara"
    solara_main()


if __name__ == "__main__":
    main()
