"""The morning report: one self-contained HTML page per nightly run, from the files its stages wrote."""
