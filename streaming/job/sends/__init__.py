"""The send path: send results reduced in the JVM, replayed into fault items on the driver, and their metrics."""
