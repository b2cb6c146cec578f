"""Pure schedule maths: when a schedule fires next. No I/O; `now` is an argument."""
