"""The backend contract suite: every backend passes the same tests (suite.py), each through its adapter."""
