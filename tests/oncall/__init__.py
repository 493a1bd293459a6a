"""On-call: rotations, overrides, /oncall, xihe oncall show."""
