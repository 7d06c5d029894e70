# nbgrader's course layout for pplab: solutions/ holds the source notebooks, exercises/ the
# student release (`python tools/build_exercises.py` runs generate_assignment).
c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.db_url = "sqlite:///.nbgrader/gradebook.db"
c.Execute.timeout = 180
