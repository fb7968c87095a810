"""The form most form tests ask with: a deployment's environment, replicas and whether to
notify, and what an agent proposes for it (issue 36)."""

DEPLOY_FORM = {
    "type": "object",
    "properties": {
        "environment": {"type": "string", "title": "Environment", "enum": ["staging", "prod"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "notify": {"type": "boolean"},
    },
    "required": ["environment", "replicas"],
}
DEPLOY_PROPOSAL = {"environment": "prod", "replicas": 3, "notify": True}
