"""The Spark side of the monitor, by path: ``ingest``, ``consumer``, ``sends``, ``delta``, ``runtime``; ``runner``
starts both queries.

Nothing here runs at import time; building a session or starting a query is always an explicit call.
"""
