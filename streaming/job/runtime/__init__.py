"""What both paths run on: the Spark session, query supervision and progress, Python workers, state blobs."""
