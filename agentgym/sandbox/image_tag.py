"""The tag of agentgym's sandbox image, apart from the builder (``agentgym.sandbox.images``) so
that choosing a sandbox does not import the builder, and ``python -m agentgym.sandbox.images``
runs a module nothing imported before."""

SUITE = "bookworm"
RECIPE = 1  # bump when the image's contents change
DEFAULT_IMAGE = f"agentgym/python:3.11-{SUITE}-r{RECIPE}"
