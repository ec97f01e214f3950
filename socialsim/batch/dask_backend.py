"""The Dask backend: the same runs as the local backend, as tasks on a ``distributed`` cluster.

Each task is ``sweeps.run_one``: ``mesa.batch_run`` of one grid point and one seed, building the
same ``SweepModel`` the local backend builds, so a run's result depends only on its parameters
and seed, never on which worker ran it or when. Workers write run directories and append to the
sweep's tape themselves, so they must see the sweep directory at the same path (this machine
for ``--cluster local``; a shared disk for a remote ``--scheduler``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from socialsim.batch.sweepfile import SweepSpec
from socialsim.batch.sweeps import PlannedRun, _max_steps, run_one, stop_runs


def run_on_dask(
    planned: list[PlannedRun],
    spec: SweepSpec,
    sweep_dir: Path,
    done: set[str],
    *,
    cluster: str | None = None,
    scheduler: str | None = None,
    client: Any = None,
    processes: int = 1,
    progress: bool = True,
    command: str | None = None,
    left_out: frozenset[int] = frozenset(),
    checked: str | None = None,
) -> None:
    """Submit every run not yet done and wait for them all (a task's error is raised here)."""
    from distributed import Client, LocalCluster, as_completed

    own_cluster = own_client = None
    if client is None:
        if scheduler:
            client = own_client = Client(scheduler)
        elif cluster == "local":
            # ":0": its HTTP server on a free port (None still tried 8787, and warned where it was taken)
            own_cluster = LocalCluster(n_workers=processes, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", host="127.0.0.1")
            client = own_client = Client(own_cluster)
        else:
            raise ValueError(f"unknown cluster {cluster!r}; expected 'local' (or give a scheduler address)")
    finished = False
    try:
        max_steps = _max_steps(planned)
        # grid point by grid point, seeds innermost: the tasks running side by side are other seeds, so
        # a grid point's run finds its seed's shared calls on the tape instead of making them too
        points = len(spec.combinations())
        todo = [planned[i] for i in sorted(range(len(planned)), key=lambda i: (i % points, i // points))
                if planned[i].run_id not in done]
        # processes: a LocalCluster's workers, among which rpm and tpm are shared out (a scheduler's are refused)
        futures = [client.submit(run_one, p.kwargs(sweep_dir.resolve(), spec, command, left_out, checked, processes),
                                 p.rng, max_steps, pure=False) for p in todo]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(planned), initial=len(planned) - len(futures), desc=f"sweep {spec.name} (dask)")
        for future in as_completed(futures):
            try:
                future.result()
            except ValueError as exc:  # a run this process built and checked, refused on the worker
                run = todo[futures.index(future)]
                raise ValueError(f"a Dask worker could not build {run.run_id}: {exc} (a worker runs with its own "
                                 "installed socialsim and architectures, which must be this machine's)") from exc
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
        finished = True
    except BaseException:  # Ctrl-C, SIGTERM: a task running goes on until its run sees this, at its next step
        stop_runs(sweep_dir)
        raise
    finally:
        if own_client is not None:
            own_client.close()
        if own_cluster is not None:
            if finished:  # stopped (Ctrl-C): its workers are killed after distributed's 4 s, as before
                _let_workers_exit(own_cluster)
            own_cluster.close()


def _let_workers_exit(cluster: Any, timeout_s: float = 60.0) -> None:
    """Close each worker process of our own LocalCluster and let it end by itself: its close()
    gives a worker 4 s, then kills it with a warning ("Worker process still alive after 4.0
    seconds, killing") that ended every finished sweep, as a worker that has run socialsim takes
    longer than that to shut its interpreter down on a busy machine."""
    import asyncio

    async def close_all() -> None:
        await asyncio.gather(*(worker.close(timeout=timeout_s) for worker in list(cluster.workers.values())))

    cluster.sync(close_all)
