"""Pure planning decisions: no dramatiq, no pymongo, no clock (`now` is always an argument)."""
