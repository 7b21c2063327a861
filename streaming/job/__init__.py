"""The Spark side of the monitor: session, ingest, stateful adapters around the domain, Delta sinks.

Nothing here runs at import time; building a session or starting a query is always an explicit call.
"""
