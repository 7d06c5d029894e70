"""Live canvases for the lessons: controls that re-simulate and redraw.

``base`` holds what every canvas shares, ``cache`` what they keep between moves (``KEPT``),
``menus`` which schedules each offers; each other module serves one family of lessons
(``timeline`` 02–04, ``interleaved`` and ``head_of_line`` 05, ``zero_bubble`` 06, ``memory``
07–09, ``runs`` 00, 10 and 11). Import the module you need:
``from pplab.canvases.timeline import timeline_canvas``.
"""
