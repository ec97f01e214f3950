"""socialsim.batch: ``batch_run`` (Mesa's, over SocietyModel, as a DataFrame), resumable sweeps
over ``mesa.batch_run`` (local or Dask), exports and sweep figures.

``sweep`` and ``export`` are imported on first use, so ``import socialsim.batch`` stays light.
"""

__all__ = ["batch_run", "export", "load_sweep", "plot_outcome", "sweep"]


def __getattr__(name: str):
    if name == "batch_run":
        from socialsim.batch.direct import batch_run

        return batch_run
    if name == "sweep":
        from socialsim.batch.sweeps import sweep

        return sweep
    if name == "export":
        from socialsim.batch.exports import export

        return export
    if name == "load_sweep":
        from socialsim.batch.sweepfile import load_sweep

        return load_sweep
    if name == "plot_outcome":
        from socialsim.batch.figures import plot_outcome

        return plot_outcome
    raise AttributeError(f"module 'socialsim.batch' has no attribute {name!r}")
