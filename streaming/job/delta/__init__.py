"""The Delta side: outcomes mapped to rows, written exactly once, gauges from the current tables, maintenance."""
