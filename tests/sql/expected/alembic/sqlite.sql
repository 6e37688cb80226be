CREATE TABLE flow_alembic_version (
    version_num VARCHAR(32) NOT NULL, 
    CONSTRAINT flow_alembic_version_pkc PRIMARY KEY (version_num)
);

-- Running upgrade  -> flow0001

CREATE TABLE bpm_flow_repository (
    id INTEGER NOT NULL, 
    instant_id VARCHAR(64) NOT NULL, 
    graph JSON, 
    states JSON, 
    vars JSON, 
    creator VARCHAR(64), 
    create_time DATETIME, 
    updater VARCHAR(64), 
    update_time DATETIME, 
    PRIMARY KEY (id), 
    CONSTRAINT "uniq_instantId" UNIQUE (instant_id)
);

CREATE TABLE bpm_flow_task (
    id INTEGER NOT NULL, 
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
    create_time DATETIME, 
    updater VARCHAR(64), 
    update_time DATETIME, 
    PRIMARY KEY (id)
);

INSERT INTO flow_alembic_version (version_num) VALUES ('flow0001') RETURNING version_num;

-- Running upgrade flow0001 -> flow0002

CREATE INDEX ix_bpm_flow_task_flow_ins_id ON bpm_flow_task (flow_ins_id);

CREATE INDEX ix_bpm_flow_task_assignee ON bpm_flow_task (assignee);

UPDATE flow_alembic_version SET version_num='flow0002' WHERE flow_alembic_version.version_num = 'flow0001';

-- Running upgrade flow0002 -> flow0003

UPDATE flow_alembic_version SET version_num='flow0003' WHERE flow_alembic_version.version_num = 'flow0002';

-- Running upgrade flow0003 -> flow0004

ALTER TABLE bpm_flow_repository ADD COLUMN graph_id VARCHAR(64);

ALTER TABLE bpm_flow_repository ADD COLUMN status INTEGER;

ALTER TABLE bpm_flow_repository ADD COLUMN finish_time DATETIME;

ALTER TABLE bpm_flow_repository ADD COLUMN open_tasks JSON;

CREATE INDEX ix_bpm_flow_repository_status ON bpm_flow_repository (status, graph_id, id);

ALTER TABLE bpm_flow_task ADD COLUMN action INTEGER;

CREATE TABLE bpm_flow_todo (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
    instant_id VARCHAR(64) NOT NULL, 
    graph_id VARCHAR(64) NOT NULL, 
    node_id VARCHAR(64) NOT NULL, 
    node_name VARCHAR(64), 
    state INTEGER NOT NULL, 
    candidate VARCHAR(128) NOT NULL, 
    lineage JSON, 
    create_time DATETIME, 
    CONSTRAINT uq_bpm_flow_todo_task UNIQUE (instant_id, node_id, candidate)
);

CREATE INDEX ix_bpm_flow_todo_candidate ON bpm_flow_todo (candidate, id);

UPDATE flow_alembic_version SET version_num='flow0004' WHERE flow_alembic_version.version_num = 'flow0003';

