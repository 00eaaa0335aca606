"""A request's path: its types and runs (`runs`), its plan and the applier (`apply`), drafts, chat."""
