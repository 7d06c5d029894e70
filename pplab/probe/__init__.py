"""Probes of the environment pplab runs in, outside the pure core's logic: ``env`` (a browser
tab under Pyodide, or a real machine?), ``slurm`` (can jobs be submitted from here?) and
``policy`` (does a class limit what runs may ask for?)."""
