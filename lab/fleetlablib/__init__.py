"""The fleetlab package: the local image-mode fleet (see lab/README.md)."""
