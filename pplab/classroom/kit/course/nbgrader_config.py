# nbgrader in the class's course folder (the grader account's): `nbgrader release_assignment`,
# `collect`, `release_feedback` and the formgrader run here, with the class's course id and
# exchange. The layout is nbgrader's own: source/, release/, submitted/, feedback/.
from pplab.classroom.settings import Settings

s = Settings.load()
c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.root = s.course_dir
c.CourseDirectory.course_id = s.course_id
c.Exchange.root = s.exchange
c.Execute.timeout = 180
# collect only what each student really handed in: a folder named for someone else, dated in
# the future, malformed or holding a link is skipped and named (pplab/classroom/exchange.py)
c.ExchangeFactory.collect = "pplab.classroom.exchange.Collect"
