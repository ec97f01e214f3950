"""The gateway to litellm: typed operations, routing, engines, tape and accounting."""
