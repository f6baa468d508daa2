"""One module per `irscope` subcommand; each offers add_parser(subparsers)."""
