"""The grader's untrusted side: what runs inside a submission's sandbox, or decides what the
sandbox holds and what may cross its wall.

* :mod:`.sandbox` starts bubblewrap around the student's kernel and reads its answers,
  capped in size and time, never trusting their content;
* :mod:`.runner` is that kernel: it runs the student's cells and answers calls as data;
* :mod:`.wire` is the wall's only language: ``encode`` runs inside (and may be tampered
  with), ``decode`` outside, building nothing the student wrote;
* :mod:`.student_edition` makes the copy of pplab the sandbox sees, with answer code cut out.

Everything above this folder (:mod:`..verdict`, :mod:`..execute`, :mod:`..job`,
:mod:`..classroom`) is the trusted side: it holds the hidden cases and makes the verdicts.
"""
