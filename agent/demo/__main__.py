"""`python -m xihe.agent.demo` runs the demo."""

from xihe.agent.demo.scenes import main

raise SystemExit(main())
