"""`python -m xihe.agent.cli …` is `xihe …`."""

from xihe.agent.cli.main import main

raise SystemExit(main())
