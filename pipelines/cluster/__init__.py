"""Runners madr stands behind beyond the local one: `dask_runner` (`--runner dask`, on dask.distributed,
with its Bag translation in `bags`), and `probe`, which refuses a runner that loses records.

The package imports none of its modules: dask is an optional extra, imported only when asked for.
"""
