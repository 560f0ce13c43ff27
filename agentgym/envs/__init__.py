"""The env families agentgym ships, one subpackage each (``frozenlake``, ``math``, ...).

Nothing is imported here: registry entry points name the subpackages as strings, so making one
env never imports another family's dependencies.
"""
