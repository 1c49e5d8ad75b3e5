"""The commands of `madr`, a module per family; `jobs.command_table.INDEX` says which module holds which.

`madr NAME` imports only NAME's module, so a module imports what its commands run and nothing more.
"""
