"""The application: the ``rebalance-monitor`` command, its subcommands, the demos and the simulated fleet.

It sits above the job and ``localenv`` (it starts local services and the job); nothing below imports it.
"""
