from copilot_otel.cli import main

raise SystemExit(main())
