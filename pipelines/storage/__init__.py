"""Where stages write and what vouches for it: object stores and local copies, the one-writer lock, outputs
written whole or not at all, stage manifests and their verification, and which catalog files a stage
read."""
