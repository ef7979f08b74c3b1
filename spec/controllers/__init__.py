"""The Python twin of tla/AckOrderControllers.tla: several controllers over one store."""
