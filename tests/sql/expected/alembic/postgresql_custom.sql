BEGIN;

CREATE TABLE acme_repo_alembic_version (
    version_num VARCHAR(32) NOT NULL, 
    CONSTRAINT acme_repo_alembic_version_pkc PRIMARY KEY (version_num)
);

-- Running upgrade  -> flow0001

CREATE TABLE acme_repo (
    id BIGSERIAL NOT NULL, 
    instant_id VARCHAR(64) NOT NULL, 
    graph JSON, 
    states JSON, 
    vars JSON, 
    creator VARCHAR(64), 
    create_time TIMESTAMP WITHOUT TIME ZONE, 
    updater VARCHAR(64), 
    update_time TIMESTAMP WITHOUT TIME ZONE, 
    PRIMARY KEY (id), 
    CONSTRAINT uq_acme_repo_instant_id UNIQUE (instant_id)
);

CREATE TABLE acme_task (
    id BIGSERIAL NOT NULL, 
    flow_ins_id VARCHAR(64) NOT NULL, 
    proc_def_id VARCHAR(64) NOT NULL, 
    task_id VARCHAR(64) NOT NULL, 
    source_node_code VARCHAR(64) NOT NULL, 
    source_node_name VARCHAR(64), 
    source_node_type VARCHAR(64) NOT NULL, 
    target_node_code VARCHAR(64) NOT NULL, 
    target_node_name VARCHAR(64) NOT NULL, 
    target_node_type VARCHAR(64) NOT NULL, 
    assignee VARCHAR(64) NOT NULL, 
    status INTEGER, 
    form_id BIGINT, 
    variables JSON, 
    message TEXT, 
    creator VARCHAR(64), 
    create_time TIMESTAMP WITHOUT TIME ZONE, 
    updater VARCHAR(64), 
    update_time TIMESTAMP WITHOUT TIME ZONE, 
    PRIMARY KEY (id)
);

INSERT INTO acme_repo_alembic_version (version_num) VALUES ('flow0001') RETURNING acme_repo_alembic_version.version_num;

-- Running upgrade flow0001 -> flow0002

CREATE INDEX ix_acme_task_flow_ins_id ON acme_task (flow_ins_id);

CREATE INDEX ix_acme_task_assignee ON acme_task (assignee);

UPDATE acme_repo_alembic_version SET version_num='flow0002' WHERE acme_repo_alembic_version.version_num = 'flow0001';

-- Running upgrade flow0002 -> flow0003

UPDATE acme_repo_alembic_version SET version_num='flow0003' WHERE acme_repo_alembic_version.version_num = 'flow0002';

-- Running upgrade flow0003 -> flow0004

ALTER TABLE acme_repo ADD COLUMN graph_id VARCHAR(64);

ALTER TABLE acme_repo ADD COLUMN status INTEGER;

ALTER TABLE acme_repo ADD COLUMN finish_time TIMESTAMP WITHOUT TIME ZONE;

ALTER TABLE acme_repo ADD COLUMN open_tasks JSON;

CREATE INDEX ix_acme_repo_status ON acme_repo (status, graph_id, id);

ALTER TABLE acme_task ADD COLUMN action INTEGER;

CREATE TABLE acme_repo_todo (
    id BIGSERIAL NOT NULL, 
    instant_id VARCHAR(64) NOT NULL, 
    graph_id VARCHAR(64) NOT NULL, 
    node_id VARCHAR(64) NOT NULL, 
    node_name VARCHAR(64), 
    state INTEGER NOT NULL, 
    candidate VARCHAR(128) NOT NULL, 
    lineage JSON, 
    create_time TIMESTAMP WITHOUT TIME ZONE, 
    PRIMARY KEY (id), 
    CONSTRAINT uq_acme_repo_todo_task UNIQUE (instant_id, node_id, candidate)
);

CREATE INDEX ix_acme_repo_todo_candidate ON acme_repo_todo (candidate, id);

UPDATE acme_repo_alembic_version SET version_num='flow0004' WHERE acme_repo_alembic_version.version_num = 'flow0003';

COMMIT;

