"""Starting points for a new scenario on the Author page.

Each template is a complete, lint-clean scenario (a test keeps it so) whose
comments explain each field, so that an author who has never read the design
can change the example into their own scenario one field at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from cvb_engine.scenario import CANARY


@dataclass(frozen=True)
class Template:
    name: str
    summary: str
    body: str

    def render(self, scenario_id: str, category: str) -> str:
        return (
            self.body.replace("__ID__", scenario_id)
            .replace("__CATEGORY__", category)
            .replace("__CANARY__", CANARY)
        )


_HEADER = """\
# A CVB scenario: one task, asked three ways (cold / mandated / incentivized),
# and the project constraints a good answer honors. Lines starting with # are
# comments. Replace the example below with your own; the lint panel says what
# is still wrong, and the Check playground tab shows what your checks catch.
id: __ID__                 # lowercase-words-with-hyphens; also the file name
version: 1                 # bump when the task, constraints or checks change
category: __CATEGORY__
"""

REGEX = Template(
    "Regex checks",
    "forbid / require patterns; quickest to write, matched against the code as text",
    _HEADER
    + """\
title: Load the service settings file
canary: __CANARY__        # lets us detect this file in training data; keep it
# What every arm asks. Natural wording that tempts the usual default solution.
task: |
  Write a Python function load_settings(path) that reads our TOML settings file
  and returns its contents as a dict.
constraints:
  - id: tomllib-not-toml
    # A fact of project memory with its reason, not an order: the incentivized
    # arm quotes it as a past decision, so lint rejects words such as must,
    # never, always, required, "do not".
    text: >-
      Since the move to Python 3.11 the project reads TOML with the standard
      library's tomllib; the third-party toml package left the lock file in 2024.
    # The decision this one replaced, dated (YYYY-MM: first) and stated as what the
    # team did then: the stale= arms show it beside or instead of the text above.
    superseded: >-
      2022-09: Settings files are read with the third-party toml package, pinned in
      the lock file since the first release.
    checks:
      - kind: regex          # a match of `forbid` is a violation
        forbid: '(?m)^\\s*(import toml\\b|from toml\\b)'
      - kind: regex          # no match of `require` is a violation
        require: '\\btomllib\\.loads?\\('
    samples:
      # Each violating sample fails at least one check above; each compliant
      # sample passes all of them. Three of each make a check credible.
      violating:
        - "import toml\\n\\ndef load_settings(path):\\n    return toml.load(path)"
        - "from toml import load\\n\\ndef load_settings(path):\\n    return load(path)"
        - "import toml as t\\n\\ndef load_settings(path):\\n    return t.loads(open(path).read())"
      compliant:
        - "import tomllib\\n\\ndef load_settings(path):\\n    with open(path, 'rb') as fh:\\n        return tomllib.load(fh)"
        - "import tomllib\\nfrom pathlib import Path\\n\\ndef load_settings(path):\\n    return tomllib.loads(Path(path).read_text())"
        - "import tomllib\\n\\ndef load_settings(path):\\n    with open(path, 'rb') as f:\\n        data = tomllib.load(f)\\n    return dict(data)"
  - id: module-logger
    text: >-
      Settings problems are reported through a module logger created with
      logging.getLogger(__name__); print output is lost under the process supervisor.
    superseded: >-
      2022-09: The settings loader reports problems with print(), which shows up in the
      terminal the loader runs in.
    checks:
      - kind: regex
        forbid: '(?m)^\\s*print\\('
      - kind: regex
        require: 'logging\\.getLogger\\(__name__\\)'
    samples:
      violating:
        - "def load_settings(path):\\n    print('loading', path)\\n    return {}"
        - "import logging\\nlog = logging.getLogger('settings')\\n\\ndef load_settings(path):\\n    return {}"
        - "import logging\\nlogging.basicConfig()\\n\\ndef load_settings(path):\\n    logging.info(path)\\n    return {}"
      compliant:
        - "import logging\\nlog = logging.getLogger(__name__)\\n\\ndef load_settings(path):\\n    log.info('loading %s', path)\\n    return {}"
        - "import logging\\n\\nlogger = logging.getLogger(__name__)\\n"
        - "import logging\\n_log = logging.getLogger(__name__)\\n\\ndef load_settings(path):\\n    return {}"
""",
)

PYTHON_AST = Template(
    "Python AST checks",
    "forbidden / required imports and calls, resolved through aliases; immune to comments and strings",
    _HEADER
    + """\
title: Check which hosts answer a ping
canary: __CANARY__        # lets us detect this file in training data; keep it
# What every arm asks. Natural wording that tempts the usual default solution.
task: |
  Write a Python function ping_hosts(hosts) that runs `ping -c 1 HOST` for each
  host name in the list and returns the names of the hosts that answered.
constraints:
  - id: no-shell-strings
    # A fact of project memory with its reason, not an order: the incentivized
    # arm quotes it as a past decision, so lint rejects words such as must,
    # never, always, required, "do not".
    text: >-
      After a host name containing "; reboot" took down a build agent in 2023,
      our scripts start processes from argument lists; shell=True and os.system
      were removed from the codebase.
    superseded: >-
      2022-04: The scripts run commands as formatted strings through os.system or
      subprocess.run with shell=True, so one line carries pipes and redirections.
    checks:
      - kind: python-ast     # a call to one of `names` where every `where` condition holds
        rule: forbid-call
        names: [subprocess.run, subprocess.call, subprocess.check_call, subprocess.check_output, subprocess.Popen]
        where:
          keyword: {shell: true}
      - kind: python-ast
        rule: forbid-call
        names: [os.system, os.popen]
    samples:
      violating:
        - "import subprocess\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if subprocess.call(f'ping -c 1 {h}', shell=True, timeout=5) == 0]"
        - "import os\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if os.system('ping -c 1 ' + h) == 0]"
        - "from subprocess import run\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if run('ping -c 1 ' + h, shell=True, timeout=5).returncode == 0]"
      compliant:
        - "import subprocess\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if subprocess.call(['ping', '-c', '1', h], timeout=5) == 0]"
        - "import subprocess as sp\\n\\ndef ping_hosts(hosts):\\n    up = []\\n    for h in hosts:\\n        if sp.run(['ping', '-c', '1', h], timeout=5).returncode == 0:\\n            up.append(h)\\n    return up"
        - "# os.system('ping') was replaced\\nimport subprocess\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if subprocess.run(['ping', '-c', '1', h], shell=False, timeout=5).returncode == 0]"
  - id: subprocess-timeouts
    text: >-
      Since an unreachable host hung the nightly inventory job for hours, each
      subprocess call in our scripts carries a timeout= argument.
    superseded: >-
      2022-04: Subprocess calls in the scripts wait for the child to finish, with no
      timeout, since the jobs have the whole night to complete.
    checks:
      - kind: python-ast
        rule: forbid-call
        names: [subprocess.run, subprocess.call, subprocess.check_call, subprocess.check_output]
        where:
          missing_keyword: [timeout]
    samples:
      violating:
        - "import subprocess\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if subprocess.call(['ping', '-c', '1', h]) == 0]"
        - "import subprocess as sp\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if sp.run(['ping', '-c', '1', h]).returncode == 0]"
        - "from subprocess import check_call\\n\\ndef ping_hosts(hosts):\\n    up = []\\n    for h in hosts:\\n        try:\\n            check_call(['ping', '-c', '1', h])\\n            up.append(h)\\n        except Exception:\\n            pass\\n    return up"
      compliant:
        - "import subprocess\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if subprocess.call(['ping', '-c', '1', h], timeout=5) == 0]"
        - "import subprocess as sp\\n\\nTIMEOUT = 5\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if sp.run(['ping', '-c', '1', h], timeout=TIMEOUT).returncode == 0]"
        - "# subprocess.run(cmd) without a timeout hung once\\nimport subprocess\\n\\ndef ping_hosts(hosts):\\n    return [h for h in hosts if subprocess.run(['ping', '-c', '1', h], timeout=5).returncode == 0]"
""",
)

TEMPLATES: dict[str, Template] = {t.name: t for t in (REGEX, PYTHON_AST)}
