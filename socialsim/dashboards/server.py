"""Start the dashboard's Solara server, offline and on the loopback interface by default.

Solara would fetch a missing front-end asset from a public CDN and report telemetry; both are
switched off here (the assets come from the ``solara-assets`` package), so no request leaves the
machine. The dashboard has no login: binding to another interface lets anyone who reaches it
drive the simulation and spend its LLM budget, hence the warning.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
DEFAULT_PORT = 8765
FD_VARIABLE = "SOCIALSIM_DASHBOARD_FD"  # the listening socket's file descriptor, handed to the server


def check_target(target: str, arch: str | None = None) -> str:
    """A scenario name/file or a run directory; raise ValueError naming what is wrong (a scenario
    whose architecture, ``arch`` or its default, is unknown too: the page would show only a traceback)."""
    from socialsim.agents import agent_class, architectures
    from socialsim.model.run_dir import is_run_dir, not_a_run_dir, runs_below
    from socialsim.scenarios.loader import SUFFIXES, available_scenarios, load_scenario
    from socialsim.scenarios.schema import space_problem

    if is_run_dir(target):
        return check_run(target)
    if Path(target).is_dir() and (target not in available_scenarios() or runs_below(target)):
        raise ValueError(not_a_run_dir(target))  # a folder named like a scenario, holding no run, is not one
    if "/" in target.replace(os.sep, "/") and Path(target).suffix not in SUFFIXES and not Path(target).exists():
        raise ValueError(not_a_run_dir(target))  # a path, not a scenario's name: "does not exist"
    spec = load_scenario(target)  # raises ScenarioError with the reason
    chosen = arch or spec.default_arch
    if chosen not in architectures():
        where = "--arch" if arch else f"{target}: default_arch"
        raise ValueError(f"{where}: unknown architecture {chosen!r} (known: {', '.join(sorted(architectures()))})")
    # an --arch without the scenario's space: the page would say so only at Reset (the check imports the
    # agent class, hence Mesa, so a scenario's own architecture, which fits it, is not checked here)
    if arch and (problem := space_problem(chosen, agent_class(chosen).space, spec)):
        raise ValueError(problem)
    if Path(target).suffix in SUFFIXES:  # a file of one's own: its architecture's section and traits too,
        check_society(target, arch)  # as `run` checks them (the page said it only as "could not be built")
    return target


def check_society(scenario: str, arch: str | None) -> None:
    """Build the society on a dry-run gateway (nothing is asked of any model), as a sweep checks its
    grid before the first run: a ValueError names the file and the field."""
    from socialsim.llm.gateway import Gateway
    from socialsim.llm.ledger import Ledger
    from socialsim.llm.routing import RouteTable
    from socialsim.model.society import SocietyModel

    SocietyModel(scenario, arch=arch, gateway=Gateway(RouteTable("rules"), ledger=Ledger(), dry_run=True), rng=0)


def check_run(run_dir: str) -> str:
    """A run directory opened as the page will open it, before the server starts: a damaged one
    (config.json cut short, a frame unreadable) is refused naming the file; one lacking files its
    config.json says it recorded opens, with a warning naming them."""
    import logging

    from socialsim.dashboards.session import ReplaySession, missing_note

    try:
        session = ReplaySession(run_dir)
    except (KeyError, OSError, ValueError) as exc:
        raise ValueError(f"cannot open {run_dir}: {exc}") from None
    if note := missing_note(session.frames):
        logging.getLogger("socialsim").warning("%s: %s", run_dir, note)
    return str(Path(run_dir).resolve())


def host_warning(host: str) -> str | None:
    if host in LOOPBACK:
        return None
    return (f"the dashboard will listen on {host}, not only on this machine: it has no login, so anyone "
            f"who can reach it can run the simulation and spend its LLM budget")


# Solara's Vega-Lite component asks for major versions (vega@5, vega-lite@5, vega-embed@6);
# solara-assets ships them under their full versions. Aliases make the local copies answer.
VEGA_ALIASES = {"vega@5": "vega@5.", "vega-lite@5": "vega-lite@5.", "vega-embed@6": "vega-embed@6."}


def offline_assets(cache: Path | None = None) -> Path:
    """A directory of the front-end assets solara-assets installed (linked, not copied), plus
    the version aliases the Vega-Lite charts ask for. Served as Solara's asset cache, so every
    script comes from this machine."""
    installed = Path(sys.prefix) / "share" / "solara" / "cdn"
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "socialsim" / "solara-cdn"
    cache.mkdir(parents=True, exist_ok=True)
    entries = sorted(installed.iterdir()) if installed.is_dir() else []
    links = {e.name: e for e in entries}
    for alias, prefix in VEGA_ALIASES.items():
        versions = sorted((e for e in entries if e.name.startswith(prefix)),  # 5.10 after 5.9
                          key=lambda e: [int(n) for n in re.findall(r"\d+", e.name[len(prefix):])])
        if versions:
            links[alias] = versions[-1]
    for name, target in links.items():
        link = cache / name
        if link.is_symlink() and link.resolve() != target.resolve():
            link.unlink()
        if not link.exists():
            link.symlink_to(target, target_is_directory=target.is_dir())
    return cache


# the settings of a live society the command line passes to the page (app.initial_session reads them)
LIVE_SETTINGS = {"arch": "SOCIALSIM_DASHBOARD_ARCH", "model": "SOCIALSIM_DASHBOARD_MODEL",
                 "seed": "SOCIALSIM_DASHBOARD_SEED", "steps": "SOCIALSIM_DASHBOARD_STEPS",
                 "max_calls": "SOCIALSIM_DASHBOARD_MAX_CALLS", "max_cost": "SOCIALSIM_DASHBOARD_MAX_COST",
                 "price": "SOCIALSIM_DASHBOARD_PRICE",
                 "api_base": "SOCIALSIM_DASHBOARD_API_BASE", "deployments": "SOCIALSIM_DASHBOARD_DEPLOYMENTS"}


def server_env(target: str, arch: str | None = None, model: str | None = None, seed: int = 42,
               **live: Any) -> dict[str, str]:
    """The server's environment: offline, and the society the command line named (``live``: the
    rest of LIVE_SETTINGS, None where not given)."""
    unknown = set(live) - set(LIVE_SETTINGS)
    if unknown:
        raise TypeError(f"server_env: no live setting {', '.join(sorted(unknown))}")
    settings = {**dict.fromkeys(LIVE_SETTINGS), **live, "arch": arch, "model": model, "seed": seed}
    env = dict(os.environ)
    env.update({name: _as_text(settings[key]) for key, name in LIVE_SETTINGS.items()})
    env.update({
        "SOLARA_ASSETS_PROXY_CACHE_DIR": str(offline_assets()),
        "SOCIALSIM_DASHBOARD_TARGET": target,
        "SOLARA_TELEMETRY_MIXPANEL_ENABLE": "False",
        # a missing asset must fail here rather than be fetched from the public CDN
        "SOLARA_ASSETS_CDN": "http://127.0.0.1:9/npm/",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    })
    return env


def _as_text(value: Any) -> str:
    """A setting as the environment holds it: "" for none, a price as IN,OUT."""
    if value is None:
        return ""
    return ",".join(str(v) for v in value) if isinstance(value, tuple | list) else str(value)


def server_command(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> list[str]:
    """``solara run`` on the dashboard, through ``solara_run``, which serves on a socket this command
    hands it (``serve``) and is ``python -m solara`` otherwise."""
    return [sys.executable, "-m", "socialsim.dashboards.solara_run", "run", "socialsim.dashboards.app",
            "--host", host, "--port", str(port),
            "--production", "--no-open", "--no-check-version", "--log-level", "warning"]


class PortUnavailable(ValueError):
    """The dashboard cannot listen on the host and port it was given; the message says why."""


def _listening(host: str, port: int, listen: bool = True) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind((host, port))
        if listen:
            sock.listen(2048)  # uvicorn's backlog
    except socket.gaierror as exc:  # a host name that does not resolve: no dashboard to blame
        sock.close()
        raise PortUnavailable(f"cannot listen on {host}: {exc.strerror or exc} (--host takes this machine's name "
                              f"or address)") from None
    except OSError as exc:
        sock.close()
        raise PortUnavailable(f"cannot listen on {host}:{port} ({exc.strerror or exc}): is another dashboard "
                              f"running? --port N picks another port") from None
    return sock


def port_in_use(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host:port`` (None when it can), said before it starts,
    so a second dashboard does not print its address and then die in uvicorn's traceback."""
    try:
        _listening(host, port, listen=False).close()
    except PortUnavailable as exc:
        return str(exc)
    return None


def serve(target: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT, arch: str | None = None,
          model: str | None = None, seed: int = 42, **live: Any) -> int:
    """Run the server in the foreground until Ctrl-C, or until this process is told to stop:
    SIGTERM or SIGHUP (a closed terminal, ``kill``) is passed on to the server, which would
    otherwise be left running on the port with nobody to stop it.

    The port is bound and listened on here, before the address is printed, and the server is handed
    the socket (``solara_run``): a port found free and bound by uvicorn only once Solara had started,
    seconds later, could be taken in between (a second dashboard started meanwhile printed its address,
    then died in uvicorn's traceback, and its address showed the first one's page). Port 0 is the one
    the system picks as it binds, and the address printed names it. Raises PortUnavailable, saying
    why, when the port cannot be listened on."""
    env = server_env(target, arch, model, seed, **live)
    listener = _listening(host, port) if os.name == "posix" else None  # pass_fds is POSIX's
    if listener is None and port == 0:  # the server would bind a port this line could not name
        raise PortUnavailable("--port 0 (a port the system picks) needs a POSIX system; --port N picks one here")
    try:
        if listener is not None:
            env[FD_VARIABLE] = str(listener.fileno())
            port = port or listener.getsockname()[1]  # the system's pick for port 0
        print(f"socialsim dashboard on http://{host if ':' not in host else f'[{host}]'}:{port}  (Ctrl-C stops it)")
        proc = subprocess.Popen(server_command(host, port), env=env,
                                pass_fds=() if listener is None else (listener.fileno(),))
    finally:
        if listener is not None:
            listener.close()  # the server holds its own copy
    stop_signals = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    previous = {sig: signal.signal(sig, lambda sig, _frame: proc.send_signal(sig)) for sig in stop_signals}
    try:
        while True:
            try:
                code = proc.wait()
                return 0 if code in (0, -signal.SIGINT, *(-sig for sig in stop_signals)) else code
            except KeyboardInterrupt:  # Ctrl-C reached the server too (same process group): let it finish
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
