"""The tag of agentgym's sandbox image and what it holds, apart from the builder
(``agentgym.sandbox.images``) so that choosing a sandbox does not import the builder, and
``python -m agentgym.sandbox.images`` runs a module nothing imported before."""

SUITE = "bookworm"
RECIPE = 2  # bump when the image's contents change
DEFAULT_IMAGE = f"agentgym/python:3.11-{SUITE}-r{RECIPE}"

SOLUTION_PACKAGES = {"numpy": "python3-numpy", "sympy": "python3-sympy"}
"""The third-party modules model-written code may import, each with the Debian package that
provides it: the image is built with them and ``scripts/docker_setup.sh`` installs them for the
local backend's ``/usr/bin/python3``. (Add one here and bump ``RECIPE``.)"""
