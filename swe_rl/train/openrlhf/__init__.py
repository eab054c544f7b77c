"""OpenRLHF 0.11.2 backend: agent executor on our sandboxes, the AEM seam, launch (see README.md here)."""
