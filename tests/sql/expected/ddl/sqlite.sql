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
	graph_id VARCHAR(64), 
	status INTEGER, 
	finish_time DATETIME, 
	open_tasks JSON, 
	PRIMARY KEY (id), 
	CONSTRAINT "uniq_instantId" UNIQUE (instant_id)
);

CREATE INDEX ix_bpm_flow_repository_status ON bpm_flow_repository (status, graph_id, id);

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
	action INTEGER, 
	PRIMARY KEY (id)
);

CREATE INDEX ix_bpm_flow_task_assignee ON bpm_flow_task (assignee);

CREATE INDEX ix_bpm_flow_task_flow_ins_id ON bpm_flow_task (flow_ins_id);

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
