"""The commands a person or a server asks: `madr search` (`search`) and the serving bundle of `madr export-
serving` (`serving_export`)."""
