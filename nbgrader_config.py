# nbgrader's course layout for pplab: solutions/ holds the source notebooks, exercises/ the
# student release (`python tools/build_exercises.py` runs generate_assignment).
# The course id and exchange folder are the class's where this machine has one (`pplab
# classroom init`, docs/classroom.md). Without a class: course "pplab", and the exchange
# $PPLAB_EXCHANGE names, else nbgrader's own (/usr/local/share/nbgrader/exchange), which
# must exist, writable by all (docs/teaching.md, "Without a hub").
import os

from pplab.classroom.settings import class_settings

c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
# the gradebook: nbgrader's default, gradebook.db here (a folder for it would be missing on
# a fresh clone, and every command that opens it would fail)
c.Execute.timeout = 180
the_class = class_settings()
c.CourseDirectory.course_id = the_class.course_id if the_class else "pplab"
if the_class:
    c.Exchange.root = the_class.exchange
elif os.environ.get("PPLAB_EXCHANGE"):
    c.Exchange.root = os.environ["PPLAB_EXCHANGE"]
