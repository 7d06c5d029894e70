"""The classroom kit: a pplab class on JupyterHub with real Unix accounts, nbgrader's exchange
and formgrader, the lessons in every student's home, and the class's limits.

* ``kit/`` — the files themselves, copied verbatim by ``pplab classroom init`` and quoted by
  docs/classroom.md: the settings template, jupyterhub_config.py, each role's Jupyter
  configuration, the course folder's nbgrader_config.py;
* :mod:`.settings` — the settings file as one object; :mod:`.hub` — what the hub's config
  calls; :mod:`.lessons` — handing out the lessons; :mod:`.setup` — ``init`` and ``up``.
"""
