# JupyterHub for a pplab class (`pplab classroom up` starts it with this file). Every value
# comes from the class's settings file (classroom.ini); docs/classroom.md explains each part.
import sys

from pplab.canvases.labserver import SERVER_FLAG
from pplab.classroom import hub
from pplab.classroom.settings import Settings

s = Settings.load()
c = get_config()  # noqa: F821 - provided by JupyterHub

c.JupyterHub.ip = s.ip
c.JupyterHub.port = int(s.port)
c.JupyterHub.hub_ip = s.hub_ip
# the hub's own API and the proxy's take the next two ports, so two hubs on one machine (a
# class and a test, two courses) never collide as JupyterHub's fixed defaults would
c.JupyterHub.hub_port = int(s.port) + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{int(s.port) + 2}"
# the hub's own state, in a folder only root can read (pplab classroom init makes it)
c.JupyterHub.db_url = f"sqlite:///{s.home}/state/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{s.home}/state/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = f"{s.home}/state/jupyterhub-proxy.pid"

# Real Unix accounts: students and instructors log in with their own password (PAM).
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {s.students, s.instructors}

# Every JupyterLab runs as its user, from the shared environment, with the fast kernel
# websocket (pplab/canvases/labserver.py), and opens on the first lesson.
c.Spawner.cmd = [f"{s.bin}/jupyterhub-singleuser"]
c.Spawner.args = [SERVER_FLAG, *s.args()]
c.Spawner.default_url = f"/lab/tree/{s.lessons_folder}/00_setup_and_first_run.ipynb"
# before each start: the lessons the student lacks are copied into their home (never over
# their own), and their JupyterLab gets the student's or the instructor's extensions
c.Spawner.pre_spawn_hook = hub.before_spawn

if s.spawner == "slurm":
    import batchspawner  # noqa: F401 - the hub API batchspawner-singleuser reports its port to

    c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
    c.JupyterHub.hub_connect_ip = s.hub_ip
    c.SlurmSpawner.batchspawner_singleuser_cmd = f"{s.bin}/batchspawner-singleuser"
    c.SlurmSpawner.exec_prefix = "/usr/sbin/runuser -u {username} --"    # the hub is root
    c.SlurmSpawner.req_prologue = f"export PATH={s.bin}:$PATH"
    c.SlurmSpawner.req_partition = s.partition
    c.SlurmSpawner.req_nprocs = s.cpus
    c.SlurmSpawner.req_memory = s.memory
    c.SlurmSpawner.req_runtime = s.time
    c.SlurmSpawner.env_keep = ["PATH", "LANG", "LC_ALL", "SLURM_CONF"]
else:       # each JupyterLab in a cgroup with the class's [hub] server_* limits
    c.JupyterHub.spawner_class = "pplab.classroom.spawner.LimitedSpawner"

# nbgrader, as its documentation sets it up for a class with several graders: the
# formgrader is a service named after the course, run by the grader account in the course
# folder; members of the instructors' group may open it, nobody else.
formgraders = f"formgrade-{s.course_id}"
c.JupyterHub.load_groups = {formgraders: {"users": hub.members(s.instructors)}}
c.JupyterHub.load_roles = [
    {"name": formgraders, "groups": [formgraders],
     "scopes": [f"access:services!service={s.course_id}", "list:services",
                f"read:services!service={s.course_id}"]},
    # the token in every JupyterLab and its kernels ($JUPYTERHUB_API_TOKEN) reaches only its
    # own server: never the formgrader or the grader account (an instructor opens those
    # logged in, from the hub's Services menu); and nobody's login can make tokens
    {"name": "server", "scopes": ["users:activity!user", "access:servers!server"]},
    {"name": "user", "scopes": ["read:users!user", "users:activity!user", "servers!user",
                                "access:servers!user"]},
    {"name": "idle-culler", "services": ["idle-culler"],
     "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
]
c.JupyterHub.services = [
    {"name": s.course_id, "url": f"http://127.0.0.1:{s.formgrader_port}",
     "command": [f"{s.bin}/jupyterhub-singleuser", SERVER_FLAG, *s.args()],
     "user": s.grader, "cwd": s.course_dir, "oauth_no_confirm": True,
     "environment": hub.environment(s, "grader") | {"JUPYTERHUB_DEFAULT_URL": "/lab"}},
    {"name": "idle-culler",
     "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                 f"--timeout={s.idle_timeout}"]},
]
