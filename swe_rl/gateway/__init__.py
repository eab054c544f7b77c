"""gateway: an OpenAI-compatible endpoint that records agent sessions as token trajectories."""
