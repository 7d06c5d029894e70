# nbgrader in every JupyterLab of the class: the course and the exchange the Assignments
# tab and the formgrader use (from the class's settings file).
from pplab.classroom.settings import Settings

s = Settings.load()
c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.course_id = s.course_id
c.Exchange.root = s.exchange
