CREATE TABLE flow.acme_repo (
	id INTEGER NOT NULL, 
	instant_id VARCHAR(64) NOT NULL, 
	graph JSON, 
	states JSON, 
	vars JSON, 
	creator VARCHAR(64), 
	create_time DATETIME, 
	updater VARCHAR(64), 
	update_time DATETIME, 
	graph_id VARCHAR(64), 
	status INTEGER, 
	finish_time DATETIME, 
	open_tasks JSON, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_acme_repo_instant_id UNIQUE (instant_id)
);

CREATE INDEX flow.ix_acme_repo_status ON acme_repo (status, graph_id, id);

CREATE TABLE flow.acme_task (
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
	action INTEGER, 
	PRIMARY KEY (id)
);

CREATE INDEX flow.ix_acme_task_assignee ON acme_task (assignee);

CREATE INDEX flow.ix_acme_task_flow_ins_id ON acme_task (flow_ins_id);

CREATE TABLE flow.acme_repo_todo (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	instant_id VARCHAR(64) NOT NULL, 
	graph_id VARCHAR(64) NOT NULL, 
	node_id VARCHAR(64) NOT NULL, 
	node_name VARCHAR(64), 
	state INTEGER NOT NULL, 
	candidate VARCHAR(128) NOT NULL, 
	lineage JSON, 
	create_time DATETIME, 
	CONSTRAINT uq_acme_repo_todo_task UNIQUE (instant_id, node_id, candidate)
);

CREATE INDEX flow.ix_acme_repo_todo_candidate ON acme_repo_todo (candidate, id);
